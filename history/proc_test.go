package history

import "testing"

func TestParseInstance(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Instance
		ok   bool
	}{
		{"instance-1", 1, true},
		{"instance-12", 12, true},
		{"instance-0", 0, false},
		{"instance--1", 0, false},
		{"instance-+1", 0, false},
		{"instance-01", 0, false},
		{"instance-", 0, false},
		{"instance-x", 0, false},
		{"i2", 0, false},
		{"holder", 0, false},
		{"", 0, false},
	} {
		got, err := ParseInstance(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseInstance(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("ParseInstance(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestParseProc(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Proc
		ok   bool
	}{
		{"i2c0", ClientProc(2, 0), true},
		{"i1c15", ClientProc(1, 15), true},
		{"i12c3", ClientProc(12, 3), true},
		{"i2", InstanceProc(2), true},
		{"i0", Proc{}, false},
		{"i0c1", Proc{}, false},
		{"i02c1", Proc{}, false},
		{"i2c01", Proc{}, false},
		{"i2c-1", Proc{}, false},
		{"i2c", Proc{}, false},
		{"ic1", Proc{}, false},
		{"x2c1", Proc{}, false},
		{"instance-2", Proc{}, false},
		{"", Proc{}, false},
	} {
		got, err := ParseProc(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseProc(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("ParseProc(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestProcNamesItsInstance(t *testing.T) {
	p, err := ParseProc("i3c1")
	if err != nil {
		t.Fatal(err)
	}
	if !p.IsClient() || p.Instance.String() != "instance-3" {
		t.Errorf("i3c1: client %v, instance %s", p.IsClient(), p.Instance)
	}
	if InstanceProc(3).IsClient() {
		t.Error("i3 is no client")
	}
}
