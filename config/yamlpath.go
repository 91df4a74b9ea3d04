package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var (
	// yamlLine is how the YAML decoder starts each message of a TypeError.
	yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)
	// unknownField is its message for a key that no field takes (strict
	// decoding); it names a Go type, which means nothing to an operator.
	unknownField = regexp.MustCompile(`^field (.+) not found in type \S+$`)
	// syntaxError is its message for a document that does not parse.
	syntaxError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// decodeError rewrites an error of decoding b into a Config so that it
// points at the fix: a type error names the field by its path
// (scenarios[0].interval), as validation errors do, an unknown key gets the
// known key it is closest to, and a syntax error names the line where the
// parser gave up rather than the line where the enclosing block began.
func decodeError(err error, b []byte) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return syntaxLine(err, b)
	}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil {
		return err
	}
	keys := map[int][]string{}
	index(&doc, "", keys)
	errs := make([]error, 0, len(te.Errors))
	for _, msg := range te.Errors {
		m := yamlLine.FindStringSubmatch(msg)
		if m == nil {
			errs = append(errs, errors.New(msg))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		if f := unknownField.FindStringSubmatch(m[2]); f != nil {
			errs = append(errs, unknownKey(f[1], line, keys[line]))
			continue
		}
		if ps := keys[line]; len(ps) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s (line %d)", ps[len(ps)-1], m[2], line))
		} else {
			errs = append(errs, fmt.Errorf("line %d: %s", line, m[2]))
		}
	}
	return errors.Join(errs...)
}

// unknownKey says which key is not known where, and what was likely meant:
// the known key nearest to it, or the keys the place takes.
func unknownKey(key string, line int, paths []string) error {
	path := key
	for _, p := range paths {
		if p == key || strings.HasSuffix(p, "."+key) {
			path = p
		}
	}
	parent := strings.TrimSuffix(strings.TrimSuffix(path, key), ".")
	known := knownKeys(reflect.TypeFor[Config](), parent)
	msg := fmt.Sprintf("%s: unknown key (line %d)", path, line)
	switch best := nearest(key, known); {
	case best != "":
		return fmt.Errorf("%s; did you mean %s?", msg, best)
	case len(known) > 0:
		return fmt.Errorf("%s; the keys here are %s", msg, strings.Join(known, ", "))
	}
	return errors.New(msg)
}

// knownKeys lists the YAML keys of the struct that path (targets[0],
// discovery[1].target.http_client_config) leads to from t, nil where it
// leads to no struct.
func knownKeys(t reflect.Type, path string) []string {
	for _, seg := range strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' }) {
		t = deref(t)
		if strings.HasSuffix(seg, "]") { // a list's item
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
			continue
		}
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem()
		case reflect.Struct:
			f, ok := field(t, seg)
			if !ok {
				return nil
			}
			t = f
		default:
			return nil
		}
	}
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	fields(t, func(name string, _ reflect.Type) { out = append(out, name) })
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// field is the type of t's field whose YAML key is name.
func field(t reflect.Type, name string) (reflect.Type, bool) {
	var out reflect.Type
	fields(t, func(n string, ft reflect.Type) {
		if n == name {
			out = ft
		}
	})
	return out, out != nil
}

// fields calls f with each YAML key of struct t and its field's type,
// descending into inlined structs as the decoder does.
func fields(t reflect.Type, f func(string, reflect.Type)) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case tag == "-" || !sf.IsExported():
		case slices.Contains(strings.Split(opts, ","), "inline"):
			if ft := deref(sf.Type); ft.Kind() == reflect.Struct {
				fields(ft, f)
			}
		case name != "":
			f(name, sf.Type)
		default:
			f(strings.ToLower(sf.Name), sf.Type)
		}
	}
}

// nearest is the known key the operator most likely meant by key: the
// same but for case, dashes and underscores (apiKeyEnv), else the one
// fewest edits away when that is a slip (at most a third of its letters,
// and at least one), "" for none.
func nearest(key string, known []string) string {
	squash := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	for _, k := range known {
		if squash(k) == squash(key) {
			return k
		}
	}
	best, bestD := "", max(1, len(key)/3)+1
	for _, k := range known {
		if d := distance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of neighbours (evn for env) cost one.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// maxLocateLines bounds the lines syntaxLine re-parses; a configuration
// is tens of lines, and a larger file keeps the parser's own line.
const maxLocateLines = 5000

// syntaxLine moves a syntax error to the line where the parser gave up.
// The YAML parser reports the line where the enclosing block began (a
// badly indented key on line 4 of a list that starts on line 1 reads
// "line 1"); the first prefix of the file, in whole lines, that fails
// alike ends on the line to fix.
func syntaxLine(err error, b []byte) error {
	m := syntaxError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > maxLocateLines {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	for n := reported; n <= len(lines); n++ {
		var doc yaml.Node
		perr := yaml.Unmarshal(bytes.Join(lines[:n], nil), &doc)
		if perr == nil {
			continue
		}
		if p := syntaxError.FindStringSubmatch(perr.Error()); p != nil && p[2] == m[2] {
			if n == reported {
				break
			}
			return fmt.Errorf("line %d: %s (in the block that begins on line %d): check line %d's indentation", n, m[2], reported, n)
		}
	}
	return fmt.Errorf("line %d: %s", reported, m[2])
}

// index records, for each line, the paths of the keys on it (several
// where a flow mapping puts them on one line), else a sequence item's,
// else a scalar's.
func index(n *yaml.Node, path string, keys map[int][]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			index(c, path, keys)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			keys[k.Line] = append(keys[k.Line], p)
			index(v, p, keys)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			if _, ok := keys[c.Line]; !ok {
				keys[c.Line] = []string{p}
			}
			index(c, p, keys)
		}
	default:
		if _, ok := keys[n.Line]; !ok {
			keys[n.Line] = []string{path}
		}
	}
}
