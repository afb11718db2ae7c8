package sim

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// olane is one case, or one lane of a case whose trials ran side by side,
// as the history text alone shows it (MODEL §14): its lines, its keys,
// its faults, and which of its kills and pauses did not act (§4).
type olane struct {
	lines     []oev
	keys      []string
	nonActing map[string]bool
	tick      bool // some events share a timestamp
}

type ometa struct {
	Keys          int   `json:"keys"`
	Lanes         int   `json:"lanes"`
	LaneInstances int   `json:"lane_instances"`
	ExpiryBoundNs int64 `json:"expiry_bound_ns"`
	Faults        []struct {
		Name   string `json:"name"`
		Lane   int    `json:"lane"`
		Target string `json:"target"`
	} `json:"faults"`
	Expect struct {
		Available *bool `json:"available"`
		Recov     int64 `json:"recovers_within_ns"`
		Measure   bool  `json:"measure"`
	} `json:"expect"`
}

func instNum(proc string) int {
	s := strings.TrimPrefix(instOf(proc), "i")
	n, _ := strconv.Atoi(s)
	return n
}

// oracleLanes splits one case's lines (case-start first) into the cases
// the checker judges.
func oracleLanes(ev []oev) []olane {
	var m ometa
	json.Unmarshal(ev[0].Meta, &m)
	nonActing := map[string]bool{}
	tick := false
	for i, e := range ev {
		if e.F == "fault-unobserved" || e.F == "fault-idle" {
			nonActing[e.Fault] = true
		}
		if i > 0 && e.T == ev[i-1].T {
			tick = true
		}
	}
	keysOf := func(l int) []string {
		var ks []string
		lo := 0
		if l > 0 {
			lo = (l - 1) * m.Keys
		}
		for k := lo; k < lo+m.Keys; k++ {
			ks = append(ks, fmt.Sprintf("k%d", k))
		}
		return ks
	}
	if m.Lanes == 0 {
		return []olane{{lines: ev, keys: keysOf(0), nonActing: nonActing, tick: tick}}
	}
	laneOfFault := map[string]int{}
	for _, f := range m.Faults {
		laneOfFault[f.Name] = f.Lane
	}
	var out []olane
	for l := 1; l <= m.Lanes; l++ {
		ol := olane{keys: keysOf(l), nonActing: nonActing, tick: tick}
		own := map[string]bool{}
		for _, k := range ol.keys {
			own[k] = true
		}
		for i, e := range ev {
			switch {
			case i == 0:
				// the meta, with the lane's faults only
				var raw map[string]json.RawMessage
				json.Unmarshal(e.Meta, &raw)
				var fs []json.RawMessage
				json.Unmarshal(raw["faults"], &fs)
				var keep []json.RawMessage
				for _, f := range fs {
					var ff struct {
						Lane int `json:"lane"`
					}
					json.Unmarshal(f, &ff)
					if ff.Lane == l {
						keep = append(keep, f)
					}
				}
				raw["faults"], _ = json.Marshal(keep)
				e.Meta, _ = json.Marshal(raw)
			case e.Fault != "":
				if fl, ok := laneOfFault[e.Fault]; ok && fl != l {
					continue
				}
			case e.Key != "":
				// an event that names a key belongs to the lane of its key
				if !own[e.Key] {
					continue
				}
			case e.Proc != "":
				n := instNum(e.Proc)
				if (n-1)/m.LaneInstances+1 != l {
					continue
				}
			}
			ol.lines = append(ol.lines, e)
		}
		out = append(out, ol)
	}
	return out
}
