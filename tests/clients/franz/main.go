// A franz-go consumer for the tests: reads a topic as a KIP-848 consumer group member
// ("consumer": the server-side assignor, offsets committed) or as a share group member
// ("share": every record acknowledged, the offsets given with -release and -reject released
// and rejected on their first delivery), and prints one JSON line per record it was given, then
// one "done" line. It stops when -records records were printed, after -idle with none, or
// when killed (a record is printed once acknowledged or committed).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type event struct {
	Event     string `json:"event"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Delivery  int32  `json:"delivery"`
	Value     string `json:"value,omitempty"`
	Error     string `json:"error,omitempty"`
}

func emit(e event) {
	line, _ := json.Marshal(e)
	fmt.Println(string(line))
}

func main() {
	mode := flag.String("mode", "consumer", "consumer (KIP-848) or share (KIP-932)")
	bootstrap := flag.String("bootstrap", "", "host:port[,host:port]")
	group := flag.String("group", "", "group id")
	topic := flag.String("topic", "", "topic")
	records := flag.Int("records", 0, "stop after this many records (0: only -idle stops)")
	idle := flag.Duration("idle", 20*time.Second, "stop after this long without a record")
	release := flag.Int64("release", -1, "share: release this offset on its first delivery")
	reject := flag.Int64("reject", -1, "share: reject this offset on its first delivery")
	flag.Parse()

	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(*bootstrap, ",")...), kgo.ConsumeTopics(*topic)}
	switch *mode {
	case "consumer":
		opts = append(opts, kgo.ConsumerGroup(*group), kgo.ServerSideBalancer(),
			kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	case "share":
		opts = append(opts, kgo.ShareGroup(*group))
	default:
		fmt.Fprintf(os.Stderr, "unknown -mode %q\n", *mode)
		os.Exit(2)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		emit(event{Event: "error", Error: err.Error()})
		os.Exit(1)
	}
	ctx := context.Background()
	seen, last := 0, time.Now()
	for (*records == 0 || seen < *records) && time.Since(last) < *idle {
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollRecords(pollCtx, 500)
		cancel()
		for _, fe := range fetches.Errors() {
			if fe.Err != context.DeadlineExceeded {
				emit(event{Event: "error", Partition: fe.Partition, Error: fe.Err.Error()})
			}
		}
		got := fetches.Records()
		if len(got) == 0 {
			continue
		}
		// acknowledged or committed before printed: what the test has seen is done
		if *mode == "share" {
			for _, r := range got {
				switch {
				case r.Offset == *release && r.DeliveryCount() == 1:
					r.Ack(kgo.AckRelease)
				case r.Offset == *reject && r.DeliveryCount() == 1:
					r.Ack(kgo.AckReject)
				default:
					r.Ack(kgo.AckAccept)
				}
			}
			if err := cl.FlushAcks(ctx); err != nil {
				emit(event{Event: "error", Error: "acks: " + err.Error()})
			}
		} else if err := cl.CommitRecords(ctx, got...); err != nil {
			emit(event{Event: "error", Error: "commit: " + err.Error()})
		}
		for _, r := range got {
			emit(event{Event: "record", Partition: r.Partition, Offset: r.Offset, Delivery: r.DeliveryCount(), Value: string(r.Value)})
		}
		seen, last = seen+len(got), time.Now()
	}
	cl.Close()
	emit(event{Event: "done"})
}
