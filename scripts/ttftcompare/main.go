// Command ttftcompare measures, against an OpenAI-compatible server on
// loopback (llama.cpp from ../shared/real-engine), headroom's probe TTFT
// beside a plain streaming client's at the same prompt length, adding
// headroom's request fields one at a time, and the same prompt resent (the
// slot cache). It prints the median of 7 of each. docs/operations.md's TTFT table
// came from it:
//
//	go run ./scripts/ttftcompare http://127.0.0.1:8080
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/probe"
)

func ttft(url string, body []byte, client *http.Client) (time.Duration, int) {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var first time.Duration
	prompt := 0
	for sc.Scan() {
		l := sc.Text()
		if first == 0 && strings.HasPrefix(l, "data: ") && strings.Contains(l, `"content":"`) && !strings.Contains(l, `"content":""`) {
			first = time.Since(t0)
		}
		if i := strings.Index(l, `"prompt_tokens":`); i >= 0 {
			fmt.Sscanf(l[i+16:], "%d", &prompt)
		}
	}
	return first, prompt
}

// median of a set of durations.
func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func tokens(url, text string) int {
	b, _ := json.Marshal(map[string]string{"content": text})
	resp, err := http.Post(url+"/tokenize", "application/json", bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var out struct{ Tokens []int }
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return len(out.Tokens)
}

func main() {
	url := os.Args[1]
	ctx := context.Background()
	client := probe.NewClient(false)
	p := probe.NewProber(probe.Endpoint{BaseURL: url, Client: client}, "chat", "", "llamacpp")
	sc := probe.Scenario{Name: "s", InputTokens: 2000, OutputTokens: 16, Cold: true, Timeout: 60 * time.Second}
	p.Probe(ctx, sc)
	words := 1000
	for tokens(url, probe.PromptText("0123456789ab", words))+10 < 2000 {
		words += 10
	}
	const n = 7
	variants := []struct {
		name  string
		extra map[string]any
	}{
		{"minimal", nil},
		{"+cache_prompt:false", map[string]any{"cache_prompt": false}},
		{"+stream_options", map[string]any{"stream_options": map[string]any{"include_usage": true}}},
		{"+min_tokens,ignore_eos,temperature 0", map[string]any{"min_tokens": 16, "ignore_eos": true, "temperature": 0}},
		{"same prompt every time (slot cache)", map[string]any{"same": true}},
		{"all of headroom's fields", map[string]any{"cache_prompt": false, "min_tokens": 16, "ignore_eos": true, "temperature": 0, "stream_options": map[string]any{"include_usage": true}}},
	}
	res := map[string][]time.Duration{}
	prompts := map[string]int{}
	for range n {
		r := p.Probe(ctx, sc)
		res["headroom probe"] = append(res["headroom probe"], r.TTFT)
		prompts["headroom probe"] = r.PromptTokens
		for _, v := range variants {
			nonce := probe.Nonce()
			if v.extra["same"] == true {
				nonce = "0123456789ab"
			}
			b := map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": probe.PromptText(nonce, words)}}, "max_tokens": 16, "stream": true,
				"stream_options": map[string]any{"include_usage": true}}
			for k, x := range v.extra {
				if k != "same" {
					b[k] = x
				}
			}
			body, _ := json.Marshal(b)
			d, pt := ttft(url, body, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
			res[v.name] = append(res[v.name], d)
			prompts[v.name] = pt
		}
		fmt.Fprint(os.Stderr, ".")
	}
	fmt.Println()
	for _, k := range append([]string{"headroom probe"}, func() (o []string) {
		for _, v := range variants {
			o = append(o, v.name)
		}
		return
	}()...) {
		fmt.Printf("%-40s median TTFT %v  prompt tokens %d\n", k, median(res[k]).Round(time.Millisecond), prompts[k])
	}
}
