package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/verify"
)

// SoakSample is one observation of the soak run.
type SoakSample struct {
	At         time.Duration `json:"at_ns"`
	OutputRate float64       `json:"output_records_per_second"` // since the previous sample
	RSSBytes   int64         `json:"worker_rss_bytes"`          // summed over the workers
	Goroutines int           `json:"worker_goroutines"`         // summed over the workers
}

// SoakResult is the outcome of a long steady run.
type SoakResult struct {
	Duration time.Duration      `json:"duration_ns"`
	Rate     int                `json:"input_rate"`
	Samples  []SoakSample       `json:"samples"`
	Verify   *verify.Report     `json:"verify"`
	Tail     *verify.TailReport `json:"concurrent_reader"`
}

// RSSGrowth is the relative growth of the workers' RSS from the first
// sample after warm-up (a tenth of the run) to the last.
func (r *SoakResult) RSSGrowth() float64 {
	first, last := r.steady()
	if first.RSSBytes == 0 {
		return 0
	}
	return float64(last.RSSBytes-first.RSSBytes) / float64(first.RSSBytes)
}

// MaxSoakRSSGrowth is the most a worker's RSS may grow after warm-up in a
// soak that passes: more is a leak.
const MaxSoakRSSGrowth = 0.10

// Verdict is nil when the soak passed: its output exactly once (verify and
// the tail reader agree) and the workers' RSS grew at most
// MaxSoakRSSGrowth after warm-up. Otherwise it says which failed.
func (r *SoakResult) Verdict() error {
	var why []string
	if !r.Verify.OK() || !r.Tail.OK() {
		why = append(why, "exactly-once broken")
	}
	if g := r.RSSGrowth(); g > MaxSoakRSSGrowth {
		why = append(why, fmt.Sprintf("worker RSS grew %.1f%% after warm-up, more than %.0f%%", 100*g, 100*MaxSoakRSSGrowth))
	}
	if len(why) > 0 {
		return fmt.Errorf("soak failed: %s", strings.Join(why, "; "))
	}
	return nil
}

// GoroutineGrowth is the change in the workers' goroutine count over the
// steady part of the run.
func (r *SoakResult) GoroutineGrowth() int {
	first, last := r.steady()
	return last.Goroutines - first.Goroutines
}

func (r *SoakResult) steady() (first, last SoakSample) {
	if len(r.Samples) == 0 {
		return
	}
	return r.Samples[len(r.Samples)/10], r.Samples[len(r.Samples)-1]
}

// Soak copies a steady input stream for d with two workers, sampling their
// memory, goroutines and throughput every interval, then verifies.
func Soak(ctx context.Context, bin string, d time.Duration, rate int, interval time.Duration, logs io.Writer) (*SoakResult, error) {
	h, err := newHarness(bin, logs)
	if err != nil {
		return nil, err
	}
	defer h.close()
	if err := h.inProcessBroker(ctx, broker.Config{}); err != nil {
		return nil, err
	}
	const app, in, out = "soak", "soak-in", "soak-out"
	n := int64(d.Seconds() * float64(rate))
	produced, err := h.Produce(ctx, in, n, 6, rate)
	if err != nil {
		return nil, err
	}
	tail, err := verify.NewTail(ctx, h.Opts, out)
	if err != nil {
		return nil, err
	}
	defer tail.Stop()
	var addrs []string
	for i := range 2 {
		addr, err := broker.FreeAddr()
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, addr)
		if err := h.startWorker(ctx, app, i, in, out, "--metrics-addr", addr); err != nil {
			return nil, err
		}
	}
	res := &SoakResult{Duration: d, Rate: rate}
	start, prevOut, prevAt := time.Now(), int64(0), time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-produced:
			if err != nil {
				return nil, err
			}
			break loop
		case now := <-tick.C:
			s := SoakSample{At: now.Sub(start)}
			if got, err := admin.EndOffsetSum(ctx, h.Client, out); err == nil {
				s.OutputRate = float64(got-prevOut) / now.Sub(prevAt).Seconds()
				prevOut, prevAt = got, now
			}
			for i, addr := range addrs {
				if p := h.Worker(fencing.ID(app, strconv.Itoa(i))); p != nil {
					s.RSSBytes += p.RSS()
				}
				s.Goroutines += goroutines(addr)
			}
			res.Samples = append(res.Samples, s)
		}
	}
	if err := h.WaitCaughtUp(ctx, committed.Wait{Group: app, Topics: []string{in}, Within: catchUp()}); err != nil {
		return nil, err
	}
	h.Stop(20 * time.Second)
	var r Result
	if err := h.judge(ctx, &r, in, out, tail); err != nil {
		return nil, err
	}
	res.Verify, res.Tail = r.Verify, r.Tail
	return res, nil
}

// goroutines scrapes go_goroutines from a worker's /metrics.
func goroutines(addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "go_goroutines") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return int(v)
		}
	}
	return 0
}
