package lab

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var pingCounts = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// Ping sends count echo requests to dst from inside ns, 200 ms apart, with
// ping(8); it fails unless every one is answered within 2 s, in one of two
// tries: userspace datapaths sharing a few cores can lose a burst when
// they are starved, which is no loss of connectivity; a second burst with
// losses is.
func Ping(ns, dst string, count int) error {
	err := pingOnce(ns, dst, count)
	if err != nil {
		err = pingOnce(ns, dst, count)
	}
	return err
}

func pingOnce(ns, dst string, count int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(count)*time.Second+10*time.Second)
	defer cancel()
	out, err := Run(ctx, nil, InNS(ns, "ping", "-n", "-q", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "2", dst)...)
	m := pingCounts.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("ping %s in %s: %v: %s", dst, ns, err, strings.TrimSpace(out))
	}
	if got, _ := strconv.Atoi(m[2]); got != count {
		return fmt.Errorf("ping %s in %s: %s of %d answered", dst, ns, m[2], count)
	}
	return nil
}

// WaitPing pings dst from inside ns once a second until an echo is
// answered or timeout passes. Use it before counting: the first packets
// to a new tunnel neighbour are lost while the switch resolves it, and
// flows take a moment to reach every chassis.
func WaitPing(ns, dst string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := Run(ctx, nil, InNS(ns, "ping", "-n", "-q", "-c", "1", "-W", "1", dst)...)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ping %s in %s: no answer within %v", dst, ns, timeout)
		}
	}
}

// NoPing checks that count echo requests to dst from inside ns, 200 ms
// apart, all go unanswered: for what a firewall should block.
func NoPing(ns, dst string, count int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(count)*time.Second+10*time.Second)
	defer cancel()
	out, err := Run(ctx, nil, InNS(ns, "ping", "-n", "-q", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "1", dst)...)
	m := pingCounts.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("ping %s in %s: %v: %s", dst, ns, err, strings.TrimSpace(out))
	}
	if m[2] != "0" {
		return fmt.Errorf("ping %s in %s: %s of %d answered, want none", dst, ns, m[2], count)
	}
	return nil
}
