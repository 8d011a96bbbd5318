package faults

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want map[string]int64
		bad  bool
	}{
		{spec: "a", want: map[string]int64{"a": 1}},
		{spec: "a:3,b", want: map[string]int64{"a": 3, "b": 1}},
		{spec: " a:2 , ", want: map[string]int64{"a": 2}},
		{spec: "a:0", bad: true},
		{spec: "a:x", bad: true},
		{spec: ":2", bad: true},
	} {
		got, err := Parse(tc.spec)
		if (err != nil) != tc.bad {
			t.Fatalf("Parse(%q): %v", tc.spec, err)
		}
		if tc.bad {
			continue
		}
		if len(got) != len(tc.want) {
			t.Fatalf("Parse(%q) = %v, want %v", tc.spec, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Fatalf("Parse(%q) = %v, want %v", tc.spec, got, tc.want)
			}
		}
	}
}

func TestArmFiresOnNthHit(t *testing.T) {
	var fired []string
	disarm := Arm("test.point", 3, func(name string) { fired = append(fired, name) })
	for range 2 {
		if !Armed("test.point") {
			t.Fatal("not armed before the 3rd hit")
		}
		Point("test.point")
	}
	if len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	Point("test.point")
	Point("test.point")
	if len(fired) != 1 || Armed("test.point") {
		t.Fatalf("fired %v, armed %v; want once, then spent", fired, Armed("test.point"))
	}
	disarm()
	Point("test.point")
	Point("other")
	if len(fired) != 1 {
		t.Fatalf("fired after disarm: %v", fired)
	}
}
