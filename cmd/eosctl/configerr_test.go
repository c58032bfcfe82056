package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// settingName is the shape of a setting the library names in a
// ConfigError or a reason: package, type, field.
var settingName = regexp.MustCompile(`^(pipeline|datagen|broker|bench|topologies)\.(Config|Options)\.[A-Z][A-Za-z]*$`)

// noFlag lists settings the library names that no eosctl flag sets, each
// with why: the map must not silently miss one, so a new setting either gets
// its flag in settingFlags or a line here.
var noFlag = map[string]string{}

// Every setting the library and the command's apps name in an error has a
// flag in settingFlags (or a reason in noFlag), so no configuration mistake
// reaches the user in Go's terms: found by reading every non-test Go file's
// string literals, so a new BadConfig call cannot slip past.
func TestEverySettingTheLibraryNamesMapsToAFlag(t *testing.T) {
	root := filepath.Join("..", "..")
	found := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && settingName.MatchString(s) {
					found[s] = path
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 20 {
		t.Fatalf("found only %d setting names in the source: the scan is broken", len(found))
	}
	for s, path := range found {
		if _, ok := settingFlags[s]; !ok && noFlag[s] == "" {
			t.Errorf("%s (named in %s) has no flag in settingFlags and no reason in noFlag", s, path)
		}
	}
}
