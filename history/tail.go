package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
)

// OpenRecovered opens the history at path for reading. When a tail
// journal exists at tailPath (the coordinator died before it could write
// the events it was holding back for ordering), the journal's events that
// are newer than the history's last complete event are appended in time
// order, and n says how many were recovered. A last line the crash cut in
// the middle is dropped first: the journal holds that event whole, if it
// holds it at all, and gluing the journal onto half a line would make the
// whole history unreadable. Without a journal it is the history as is (a
// cut last line is then the Reader's to report).
func OpenRecovered(path, tailPath string) (r io.ReadCloser, n int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	tail, err := os.ReadFile(tailPath)
	if os.IsNotExist(err) {
		return f, 0, nil
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("read tail journal: %w", err)
	}
	complete, lastT, lastLines, err := lastEvents(f)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	type rec struct {
		t    int64
		line []byte
	}
	var recs []rec
	sc := bufio.NewScanner(bytes.NewReader(tail))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		var e struct {
			T int64 `json:"t"`
		}
		if len(line) == 0 || json.Unmarshal(line, &e) != nil {
			continue // a journal line cut by the crash
		}
		if e.T < lastT || (e.T == lastT && lastLines[string(line)]) {
			continue // already in the history
		}
		recs = append(recs, rec{e.T, append([]byte(nil), line...)})
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].t < recs[j].t })
	var extra bytes.Buffer
	for _, r := range recs {
		extra.Write(r.line)
		extra.WriteByte('\n')
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.NewSectionReader(f, 0, complete), &extra), f}, len(recs), nil
}

// lastEvents returns the length of the history up to the end of its last
// complete line, the time of its last complete event and the lines that
// carry that time.
func lastEvents(f *os.File) (complete, lastT int64, same map[string]bool, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, nil, err
	}
	size := st.Size()
	// Find the end of the last complete line, reading back from the end.
	complete = -1
	for end := size; end > 0 && complete < 0; {
		start := max(0, end-(1<<20))
		buf := make([]byte, end-start)
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return 0, 0, nil, fmt.Errorf("read history end: %w", err)
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			complete = start + int64(i) + 1
		}
		end = start
	}
	if complete < 0 {
		complete = 0 // not one complete line
	}
	start := max(0, complete-(1<<20))
	buf := make([]byte, complete-start)
	if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
		return 0, 0, nil, fmt.Errorf("read history end: %w", err)
	}
	lines := bytes.Split(buf, []byte{'\n'})
	lastT = -1
	same = map[string]bool{}
	for i := len(lines) - 1; i >= 0; i-- {
		line := bytes.TrimSpace(lines[i])
		var e struct {
			T *int64 `json:"t"`
		}
		if len(line) == 0 || json.Unmarshal(line, &e) != nil || e.T == nil {
			continue
		}
		if lastT == -1 {
			lastT = *e.T
		}
		if *e.T != lastT {
			break
		}
		same[string(line)] = true
	}
	return complete, lastT, same, nil
}
