package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// yamlLine is how yaml.v3 starts each message of a TypeError.
var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// withPaths rewrites a decoding error so that each of its messages names the
// field by its path (scenarios[0].interval), as validation errors do, not
// only by a line number. doc is the same file parsed into nodes.
func withPaths(err error, doc *yaml.Node) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	paths := map[int]string{}
	index(doc, "", paths)
	errs := make([]error, 0, len(te.Errors))
	for _, msg := range te.Errors {
		m := yamlLine.FindStringSubmatch(msg)
		if m == nil {
			errs = append(errs, errors.New(msg))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		if p, ok := paths[line]; ok {
			errs = append(errs, fmt.Errorf("%s: %s (line %d)", p, m[2], line))
		} else {
			errs = append(errs, fmt.Errorf("line %d: %s", line, m[2]))
		}
	}
	return errors.Join(errs...)
}

// index records, for each line, the path of the field on it: a mapping key's
// (the last, where a flow mapping puts several on one line), else a
// sequence item's, else a scalar's.
func index(n *yaml.Node, path string, paths map[int]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			index(c, path, paths)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			paths[k.Line] = p
			index(v, p, paths)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			if _, ok := paths[c.Line]; !ok {
				paths[c.Line] = p
			}
			index(c, p, paths)
		}
	default:
		if _, ok := paths[n.Line]; !ok {
			paths[n.Line] = path
		}
	}
}
