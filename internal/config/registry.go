package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/lockbench/lockbench/internal/suggest"
)

// Registry maps names to what was registered under them: backends, fault
// types. It is the one registry helper of the module: Register panics on
// an empty name or a duplicate (programming errors, caught at start-up);
// Lookup of an unknown name says which names exist and the nearest one.
type Registry[T any] struct {
	what  string // "backend", "fault type": for messages
	mu    sync.RWMutex
	items map[string]T
}

// NewRegistry returns an empty registry of what ("backend").
func NewRegistry[T any](what string) *Registry[T] {
	return &Registry[T]{what: what, items: map[string]T{}}
}

// Register adds v under name.
func (r *Registry[T]) Register(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" {
		panic(fmt.Sprintf("config: a %s registered without a name", r.what))
	}
	if _, dup := r.items[name]; dup {
		panic(fmt.Sprintf("config: duplicate %s %q", r.what, name))
	}
	r.items[name] = v
}

// Lookup returns what is registered under name.
func (r *Registry[T]) Lookup(name string) (T, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.items[name]
	if !ok {
		names := r.namesLocked()
		return v, fmt.Errorf("unknown %s %q%s (known: %s)", r.what, name, suggest.Hint(name, names), strings.Join(names, ", "))
	}
	return v, nil
}

// All returns everything registered, sorted by name.
func (r *Registry[T]) All() []T {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]T, 0, len(r.items))
	for _, n := range r.namesLocked() {
		out = append(out, r.items[n])
	}
	return out
}

// Names returns the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.namesLocked()
}

func (r *Registry[T]) namesLocked() []string {
	names := make([]string, 0, len(r.items))
	for n := range r.items {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Option describes one option of an options struct.
type Option struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Doc  string `json:"doc"`
}

// OptionsOf lists the options of an options struct (the zero value of a
// backend's or a fault's) from its yaml and doc tags, inline structs
// flattened, in declaration order: what `bench list` shows.
func OptionsOf(v any) []Option {
	if v == nil {
		return nil
	}
	return optionsOf(reflect.TypeOf(v))
}

func optionsOf(t reflect.Type) []Option {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []Option
	for n := 0; n < t.NumField(); n++ {
		f := t.Field(n)
		tag := f.Tag.Get("yaml")
		name, flags, _ := strings.Cut(tag, ",")
		if flags == "inline" {
			out = append(out, optionsOf(f.Type)...)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		out = append(out, Option{Name: name, Type: typeName(f.Type), Doc: f.Tag.Get("doc")})
	}
	return out
}

// typeName names an option's type the way a scenario file writes it.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "Duration" {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "int"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "bool"
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	}
	return t.Kind().String()
}

// Article is word with its indefinite article: "an etcd", "a redis".
func Article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}
