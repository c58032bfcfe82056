package chaos

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// transactionalInput copies an input written in transactions of 500
// records, every third one aborted, with worker SIGKILLs on the way. After
// draining, the group's committed offset must equal the end offset of every
// input partition (the last control marker included): nothing skipped and
// nothing left behind.
func transactionalInput(ctx context.Context, h *harness, sz Size, res *Result, _ workload) error {
	if err := h.inProcessBroker(ctx, broker.Config{}); err != nil {
		return err
	}
	const app, in, out = "txin", "txin-in", "txin-out"
	if _, _, err := admin.EnsureTopic(ctx, h.Client, in, 4, nil); err != nil {
		return err
	}
	tail, err := verify.NewTail(ctx, h.Opts, out)
	if err != nil {
		return err
	}
	defer tail.Stop()
	for i := range 2 {
		if err := h.startWorker(ctx, app, i, in, out); err != nil {
			return err
		}
	}
	aborted, err := produceTransactions(ctx, h.Opts, in, sz, func(batch int) error {
		if batch%7 == 3 {
			return h.KillAndRestart(ctx, app+"-"+strconv.Itoa(batch%2))
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.Faults = fmt.Sprintf("%d of the input's transactions aborted; workers SIGKILLed every 7th batch", aborted)
	if err := h.WaitCaughtUp(ctx, committed.Wait{Group: app, Topics: []string{in}, Within: catchUp()}); err != nil {
		return err
	}
	h.Stop(20 * time.Second)
	if err := committedAtEnd(ctx, h.Client, app, in); err != nil {
		return err
	}
	res.Notes = append(res.Notes, "committed offset = end offset on every input partition after draining")
	return h.judge(ctx, res, in, out, tail)
}

func produceTransactions(ctx context.Context, opts []kgo.Opt, topic string, sz Size, between func(batch int) error) (aborted int, err error) {
	p, err := kgo.NewClient(append(opts, kgo.TransactionalID("chaos-input-producer"), kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	const batch = 500
	pause := time.Duration(float64(batch) / float64(sz.Rate) * float64(time.Second))
	for b, seq := 0, int64(0); seq < sz.Records; b++ {
		if err := p.BeginTransaction(); err != nil {
			return aborted, err
		}
		for i := 0; i < batch && seq < sz.Records; i++ {
			ts := time.Now()
			p.Produce(ctx, &kgo.Record{Key: []byte(strconv.FormatInt(seq, 10)), Value: datagen.Value(seq, ts, 100), Timestamp: ts}, nil)
			seq++
		}
		if err := p.Flush(ctx); err != nil {
			return aborted, err
		}
		commit := b%3 != 1
		if !commit {
			aborted++
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return aborted, fmt.Errorf("ending input transaction %d: %w", b, err)
		}
		if err := between(b); err != nil {
			return aborted, err
		}
		time.Sleep(pause)
	}
	return aborted, nil
}

// committedAtEnd checks that group's committed offset equals the high
// watermark of every partition of topic.
func committedAtEnd(ctx context.Context, cl *kgo.Client, group, topic string) error {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	var bad error
	ends.Each(func(e kadm.ListedOffset) {
		o, ok := offs.Lookup(topic, e.Partition)
		if !ok || o.At != e.Offset {
			bad = fmt.Errorf("%s[%d]: committed offset %d, end offset %d", topic, e.Partition, o.At, e.Offset)
		}
	})
	return bad
}
