package inspect

import (
	"errors"
	"testing"
	"time"
)

// Both repairs, planned then done, leave the partitions with LSO = HWM and
// the open transaction's records invisible to read_committed, and their
// plans and results say what was there before and after. A plan for
// nothing to repair is an error (marker) or not Needed (fence).
func TestRepairsPlanAbortAndReportTheLSO(t *testing.T) {
	c := newCluster(t)
	c.topic(t, "in", 2)
	c.produce(t, "in", 0, 4)
	c.produce(t, "in", 1, 2)
	c.hang(t, "by-marker", "in", 0, 3)
	fenced := c.hang(t, "by-fence", "in", 1, 5)

	if _, err := PlanMarker(c.ctx, c.adm, "in", 0, 5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PlanMarker at an offset where no transaction starts: %v, want ErrNotFound", err)
	}
	m, err := PlanMarker(c.ctx, c.adm, "in", 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Needed() || m.Method != "marker" || m.Producer == nil || len(m.Before) != 1 || m.Before[0].LSO != 4 || m.Before[0].HWM != 7 {
		t.Fatalf("marker plan = %+v, want the producer and in[0] at LSO 4, HWM 7", m)
	}
	res, err := m.Do(c.ctx, c.adm, c.opts, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Aborted || len(res.After) != 1 || res.After[0].LSO != res.After[0].HWM || res.After[0].HWM != 8 {
		t.Fatalf("marker result = %+v, want in[0] at LSO = HWM = 8 (7 + the marker)", res)
	}

	f, err := PlanFence(c.ctx, c.adm, "by-fence")
	if err != nil {
		t.Fatal(err)
	}
	if !f.Needed() || f.Transaction == nil || f.Starts["in"][1] != 2 || len(f.Before) != 1 || f.Before[0].Partition != 1 {
		t.Fatalf("fence plan = %+v (starts %v), want the open transaction from in[1]@2", f, f.Starts)
	}
	res, err = f.Do(c.ctx, c.adm, c.opts, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Aborted || res.Fenced == nil || res.Fenced.Epoch <= f.Transaction.ProducerEpoch || len(res.After) != 1 || res.After[0].LSO != res.After[0].HWM {
		t.Fatalf("fence result = %+v, want a higher epoch and in[1] at LSO = HWM", res)
	}
	if err := fenced.EndTransaction(c.ctx, true); err == nil {
		t.Fatal("the fenced producer committed")
	}
	for p, want := range map[int32]int{0: 4, 1: 2} {
		if n := readCommitted(t, c, "in", p); n != want {
			t.Fatalf("read_committed sees %d records of in[%d], want the %d committed ones", n, p, want)
		}
	}
	again, err := PlanFence(c.ctx, c.adm, "by-fence")
	if err != nil {
		t.Fatal(err)
	}
	if again.Needed() {
		t.Fatalf("a second fence plan = %+v, want nothing to do", again.Transaction)
	}
	if res, err := again.Do(c.ctx, c.adm, c.opts, time.Second); err != nil || res.Aborted {
		t.Fatalf("doing a plan that is not needed: %+v, %v; want nothing done", res, err)
	}
}
