package verdict

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublicTypesAreNameable: every type verdict's exported API reaches
// (what its functions take and return, its types' exported fields and
// methods, and so on through lockbench's public packages) is nameable by
// a module outside lockbench: a type of one of lockbench's internal
// packages must have an alias here (public.go).
func TestPublicTypesAreNameable(t *testing.T) {
	const module = "github.com/lockbench/lockbench/"
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var syntax []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		syntax = append(syntax, af)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check(module+"verdict", fset, syntax, nil)
	if err != nil {
		t.Fatal(err)
	}
	aliased := map[types.Type]bool{}
	for _, name := range pkg.Scope().Names() {
		if tn, ok := pkg.Scope().Lookup(name).(*types.TypeName); ok && tn.IsAlias() {
			aliased[types.Unalias(tn.Type())] = true
		}
	}
	seen := map[types.Type]bool{}
	var visit func(ty types.Type, via string)
	visit = func(ty types.Type, via string) {
		ty = types.Unalias(ty)
		if seen[ty] {
			return
		}
		seen[ty] = true
		switch x := ty.(type) {
		case *types.Pointer:
			visit(x.Elem(), via)
		case *types.Slice:
			visit(x.Elem(), via)
		case *types.Array:
			visit(x.Elem(), via)
		case *types.Map:
			visit(x.Key(), via)
			visit(x.Elem(), via)
		case *types.Chan:
			visit(x.Elem(), via)
		case *types.Signature:
			for i := 0; i < x.Params().Len(); i++ {
				visit(x.Params().At(i).Type(), via)
			}
			for i := 0; i < x.Results().Len(); i++ {
				visit(x.Results().At(i).Type(), via)
			}
		case *types.Struct:
			for i := 0; i < x.NumFields(); i++ {
				if f := x.Field(i); f.Exported() || f.Embedded() {
					visit(f.Type(), via+"."+f.Name())
				}
			}
		case *types.Named:
			p := x.Obj().Pkg()
			if p == nil || !strings.HasPrefix(p.Path()+"/", module) {
				return // the standard library's or another module's
			}
			path := strings.TrimPrefix(p.Path(), module)
			if (strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/")) && !aliased[x] {
				t.Errorf("%s reaches %s.%s, which a module outside lockbench cannot name: alias it in verdict/public.go", via, path, x.Obj().Name())
			}
			visit(x.Underlying(), via)
			for i := 0; i < x.NumMethods(); i++ {
				if m := x.Method(i); m.Exported() {
					visit(m.Type(), via+"."+m.Name()+"()")
				}
			}
		}
	}
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		visit(obj.Type(), "verdict."+name)
		if tn, ok := obj.(*types.TypeName); ok {
			pt := types.NewPointer(tn.Type())
			ms := types.NewMethodSet(pt)
			for i := 0; i < ms.Len(); i++ {
				if m := ms.At(i).Obj(); m.Exported() {
					visit(m.Type(), "verdict."+name+"."+m.Name()+"()")
				}
			}
		}
	}
}
