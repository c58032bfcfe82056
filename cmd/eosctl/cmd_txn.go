package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/eosctl/eos/inspect"
	"github.com/spf13/cobra"
)

func newTxnCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Inspect transactions, find hanging ones, and abort them",
		Long: `Transaction tools for any Kafka cluster, after Kafka's kafka-transactions.sh
(KIP-664) and rpk cluster txn.

An open transaction pins the last stable offset (LSO) of every partition it
wrote to: read_committed consumers stop there, whatever the high watermark
says. A transaction whose producer died is normally aborted by its
coordinator after transaction.timeout.ms; one that its coordinator lost (a
bug, a lost marker, an expired transactional id) hangs forever. "txn hanging"
finds those, "txn abort" clears them.`,
		Example: `  eosctl txn list --state Ongoing
  eosctl txn describe copy-0 copy-1
  eosctl txn producers --topic orders --partition 3
  eosctl txn hanging --older-than 5m
  eosctl txn abort --topic orders --partition 3 --start-offset 1200
  eosctl txn abort --transactional-id copy-0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usage(fmt.Errorf("txn needs a subcommand: list, describe, producers, hanging or abort"))
		},
	}
	cmd.AddCommand(newTxnListCmd(g), newTxnDescribeCmd(g), newTxnProducersCmd(g), newTxnHangingCmd(g), newTxnAbortCmd(g))
	return cmd
}

// txnRun connects, runs fn, and closes.
func txnRun(g *globals, fn func(ctx context.Context, c *adminConn) error) error {
	ctx, stop := signalContext()
	defer stop()
	c, err := g.connectAdmin(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return notFound(fn(ctx, c))
}

func newTxnListCmd(g *globals) *cobra.Command {
	var states []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--state STATE,...]",
		Short: "List transactional ids: coordinator, producer id, state",
		Long: `Lists every transactional id the coordinators know, with its coordinator,
producer id and state (Empty, Ongoing, PrepareCommit, PrepareAbort,
CompleteCommit, CompleteAbort, Dead, PrepareEpochFence).`,
		Example: `  eosctl txn list
  eosctl txn list --state Ongoing --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return txnRun(g, func(ctx context.Context, c *adminConn) error {
				ls, err := inspect.ListTransactions(ctx, c.adm, states...)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNil(ls))
				}
				t := newTable(cmd.OutOrStdout(), "COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "STATE")
				for _, l := range ls {
					t.row(l.Coordinator, l.TransactionalID, l.ProducerID, l.State)
				}
				t.flush()
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only transactions in these states (e.g. Ongoing)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTxnDescribeCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe TRANSACTIONAL-ID...",
		Short: "Describe transactional ids: producer id and epoch, state, start, timeout, partitions",
		Long: `Asks each transactional id's coordinator for its producer id and epoch, its
state, when the open transaction started, its timeout and the partitions in
it. An unknown id is bad input (exit code 2).`,
		Example: `  eosctl txn describe copy-0
  eosctl txn describe copy-0 copy-1 --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usage(fmt.Errorf("describe needs at least one transactional id (see `eosctl txn list`)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, ids []string) error {
			return txnRun(g, func(ctx context.Context, c *adminConn) error {
				ts, err := inspect.DescribeTransactions(ctx, c.adm, ids...)
				if errors.Is(err, inspect.ErrNotFound) {
					return fmt.Errorf("%w (`eosctl txn list` shows the known ones)", err)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), ts)
				}
				t := newTable(cmd.OutOrStdout(), "COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE", "START", "AGE", "TIMEOUT", "PARTITIONS")
				for _, tx := range ts {
					a := "-"
					if !tx.Started.IsZero() {
						a = age(time.Since(tx.Started))
					}
					t.row(tx.Coordinator, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.State, stamp(tx.Started), a, tx.Timeout, inspect.FormatPartitions(tx.Partitions))
				}
				t.flush()
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTxnProducersCmd(g *globals) *cobra.Command {
	var (
		topic     string
		partition int32
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "producers --topic TOPIC [--partition P]",
		Short: "Describe the producers of a topic's partitions (DescribeProducers)",
		Long: `Asks the partition leaders which producers are active on each partition:
producer id and epoch, last sequence, last write time, coordinator epoch, and
the first offset of the producer's open transaction (TXN-START-OFFSET, "-" if
none). A transaction whose start offset is the partition's LSO is the one
holding read_committed consumers back; "txn abort --start-offset" takes that
offset.`,
		Example: `  eosctl txn producers --topic orders
  eosctl txn producers --topic orders --partition 3 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var parts []int32
			if cmd.Flags().Changed("partition") {
				if partition < 0 {
					return usage(fmt.Errorf("--partition must not be negative, got %d", partition))
				}
				parts = append(parts, partition)
			}
			return txnRun(g, func(ctx context.Context, c *adminConn) error {
				ps, err := inspect.Producers(ctx, c.adm, topic, parts...)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNil(ps))
				}
				t := newTable(cmd.OutOrStdout(), "LEADER", "TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "COORDINATOR-EPOCH", "TXN-START-OFFSET")
				for _, p := range ps {
					start := fmt.Sprint(p.TxnStartOffset)
					if p.TxnStartOffset < 0 {
						start = "-"
					}
					t.row(p.Leader, p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.LastSequence, stamp(p.LastTimestamp), p.CoordinatorEpoch, start)
				}
				t.flush()
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic to describe (required)")
	f.Int32Var(&partition, "partition", 0, "only this partition (default: all)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

func newTxnHangingCmd(g *globals) *cobra.Command {
	var (
		olderThan time.Duration
		topics    []string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "hanging [--older-than D] [--topics T,...]",
		Short: "Find hanging transactions (KIP-664 find-hanging)",
		Long: `Runs Kafka's find-hanging procedure: DescribeProducers on every partition
(of --topics, default all), then ListTransactions and DescribeTransactions for
the producers with an open transaction. A transaction is hanging when it is
open longer than --older-than (default: the brokers'
transaction.max.timeout.ms, which no healthy transaction outlives), or when its
coordinator does not know it (no transactional id holds its producer id, or
the id's transaction does not include the partition); such a one is described
twice, to rule out a transaction that was just completing.

For each, it prints the partition, the producer, the transaction's start
offset (what "txn abort --start-offset" takes), its age, and BLOCKED: how many
offsets of the partition read_committed consumers cannot see because of it
(HWM - start offset). Exit code 0 whether or not any are found; with --json,
"hanging" is the list.`,
		Example: `  eosctl txn hanging
  eosctl txn hanging --older-than 2m --topics orders,payments
  eosctl txn hanging --json | jq '.hanging | length'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan < 0 {
				return usage(fmt.Errorf("--older-than must not be negative, got %s", olderThan))
			}
			return txnRun(g, func(ctx context.Context, c *adminConn) error {
				hs, thr, err := inspect.FindHanging(ctx, c.adm, olderThan, topics...)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), struct {
						Threshold time.Duration             `json:"threshold_ns"`
						Hanging   []inspect.OpenTransaction `json:"hanging"`
					}{thr, nonNil(hs)})
				}
				if len(hs) == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "no hanging transactions (open longer than %s or unknown to their coordinator)\n", thr)
					return nil
				}
				printHanging(cmd.OutOrStdout(), hs)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.DurationVar(&olderThan, "older-than", 0, "age past which an open transaction is hanging (default: the brokers' transaction.max.timeout.ms)")
	f.StringSliceVar(&topics, "topics", nil, "topics to check (default: all non-internal topics)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printHanging(w io.Writer, hs []inspect.OpenTransaction) {
	t := newTable(w, "TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "START-OFFSET", "AGE", "LSO", "HWM", "BLOCKED", "TRANSACTIONAL-ID", "REASON")
	for _, h := range hs {
		t.row(h.Topic, h.Partition, h.ProducerID, h.ProducerEpoch, h.StartOffset, age(h.Age), h.LSO, h.HWM, h.Blocked, orDash(h.TransactionalID), h.Reason)
	}
	t.flush()
}

func newTxnAbortCmd(g *globals) *cobra.Command {
	var (
		topic       string
		partition   int32
		startOffset int64
		id          string
		yes, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "abort (--topic T --partition P --start-offset O | --transactional-id ID) [--yes]",
		Short: "Abort a hanging transaction: by its start offset, or by fencing its transactional id",
		Long: `Two ways to abort an open transaction, both printing the LSO before and after
and asking for confirmation unless --yes:

--topic, --partition and --start-offset write an abort marker to that one
partition for the producer whose transaction starts there, as
kafka-transactions.sh abort does. This is the repair for a transaction its
coordinator has lost; take the offset from "txn hanging" or "txn producers".
The coordinator is not involved, so do not use it on a transaction the
coordinator still tracks. Kafka requires CLUSTER_ACTION on the cluster.

--transactional-id fences the id: an InitProducerId bumps its epoch, and the
coordinator aborts its open transaction on every partition. A live producer
using the id is fenced too (an eos worker exits with code 3; run it again and
it resumes from its committed offsets). An id with no open transaction is
left alone.`,
		Example: `  eosctl txn hanging --older-than 10m
  eosctl txn abort --topic orders --partition 3 --start-offset 1200
  eosctl txn abort --transactional-id copy-0 --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			byOffset := cmd.Flags().Changed("topic") || cmd.Flags().Changed("partition") || cmd.Flags().Changed("start-offset")
			switch {
			case byOffset && id != "":
				return usage(fmt.Errorf("give either --transactional-id or --topic/--partition/--start-offset, not both"))
			case id == "" && !byOffset:
				return usage(fmt.Errorf("give --transactional-id, or --topic, --partition and --start-offset"))
			case byOffset && (topic == "" || !cmd.Flags().Changed("partition") || !cmd.Flags().Changed("start-offset")):
				return usage(fmt.Errorf("aborting by offset needs all of --topic, --partition and --start-offset"))
			case byOffset && (partition < 0 || startOffset < 0):
				return usage(fmt.Errorf("--partition and --start-offset must not be negative"))
			}
			ask := func(q string) error {
				if yes {
					return nil
				}
				return confirm(cmd.InOrStdin(), q)
			}
			return txnRun(g, func(ctx context.Context, c *adminConn) error {
				if byOffset {
					return abortAt(ctx, c, cmd.OutOrStdout(), asJSON, ask, topic, partition, startOffset)
				}
				return abortByID(ctx, c, cmd.OutOrStdout(), asJSON, ask, id)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic of the hanging transaction")
	f.Int32Var(&partition, "partition", 0, "partition of the hanging transaction")
	f.Int64Var(&startOffset, "start-offset", 0, "first offset of the hanging transaction on that partition")
	f.StringVar(&id, "transactional-id", "", "fence this transactional id, aborting its open transaction")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	f.BoolVar(&asJSON, "json", false, "print JSON (the question, if asked, goes to stderr)")
	return cmd
}

// abortAt shows the marker repair of the transaction at start, asks, and
// does it.
func abortAt(ctx context.Context, c *adminConn, w io.Writer, asJSON bool, ask func(string) error, topic string, partition int32, start int64) error {
	r, err := inspect.PlanMarker(ctx, c.adm, topic, partition, start)
	if errors.Is(err, inspect.ErrNotFound) {
		return fmt.Errorf("%w (`eosctl txn producers --topic %s --partition %d` lists the open ones)", err, topic, partition)
	}
	if err != nil {
		return err
	}
	say := sayer(w, asJSON)
	p, o := r.Producer, r.Before[0]
	say("open transaction on %s[%d]: producer id %d epoch %d (coordinator epoch %d), from offset %d, %d offsets behind it", topic, partition, p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, start, o.HWM-start)
	say("LSO before: %d (HWM %d)", o.LSO, o.HWM)
	if err := ask(fmt.Sprintf("write an abort marker for producer id %d to %s[%d]?", p.ProducerID, topic, partition)); err != nil {
		return err
	}
	res, err := r.Do(ctx, c.adm, c.opts, 10*time.Second)
	if !res.Aborted {
		return err
	}
	if len(res.After) > 0 {
		say("abort marker written\nLSO after: %d (HWM %d)", res.After[0].LSO, res.After[0].HWM)
	}
	if asJSON {
		_ = printJSON(w, res)
	}
	if err != nil {
		return fmt.Errorf("%s[%d] from offset %d: %w", topic, partition, start, err)
	}
	return nil
}

// abortByID shows the fence of transactional id id, asks, and does it.
func abortByID(ctx context.Context, c *adminConn, w io.Writer, asJSON bool, ask func(string) error, id string) error {
	r, err := inspect.PlanFence(ctx, c.adm, id)
	if err != nil {
		return err
	}
	say := sayer(w, asJSON)
	tx := r.Transaction
	if !r.Needed() {
		say("transactional id %q has no open transaction (state %s); nothing to abort. A transaction its coordinator lost is aborted with --topic/--partition/--start-offset (see `eosctl txn hanging`).", id, tx.State)
		if asJSON {
			return printJSON(w, inspect.RepairResult{Method: r.Method})
		}
		return nil
	}
	say("transactional id %q: producer id %d epoch %d, %s since %s (%s), timeout %s, partitions %s",
		id, tx.ProducerID, tx.ProducerEpoch, tx.State, stamp(tx.Started), age(time.Since(tx.Started)), tx.Timeout, inspect.FormatPartitions(tx.Partitions))
	for _, o := range r.Before {
		say("LSO before: %s[%d] %d (HWM %d)", o.Topic, o.Partition, o.LSO, o.HWM)
	}
	if err := ask(fmt.Sprintf("fence transactional id %q (bumps its epoch; a live producer using it is fenced and its open transaction aborted)?", id)); err != nil {
		return err
	}
	res, err := r.Do(ctx, c.adm, c.opts, 30*time.Second)
	if !res.Aborted {
		return err
	}
	say("fenced: producer id %d now at epoch %d", res.Fenced.ProducerID, res.Fenced.Epoch)
	for _, o := range res.After {
		say("LSO after: %s[%d] %d (HWM %d)", o.Topic, o.Partition, o.LSO, o.HWM)
	}
	if asJSON {
		_ = printJSON(w, res)
	}
	if err != nil {
		return fmt.Errorf("fenced %q: %w", id, err)
	}
	return nil
}

// sayer prints a line of the human form, and nothing under --json.
func sayer(w io.Writer, asJSON bool) func(string, ...any) {
	return func(format string, args ...any) {
		if !asJSON {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}

// nonNil makes an empty result print as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
