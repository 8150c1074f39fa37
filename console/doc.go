// Package console is a web console for leasehold workers: an [http.Handler]
// that shows, live, what the workers do (jobs per second by outcome, leases
// held and lost, takeovers, compensations, dead letters, commit lag), the
// jobs running now with their lease countdown and heartbeat details, one key
// in depth (record, fence, attempts, cached outcome, saga journal), and the
// dead-lettered compensations and records.
//
// It is read-only by default. With [Config.Actions] it also offers expire,
// reset, compensation retry and dead-letter replay, each behind
// authentication (a token or a user and password, see [Auth]), a CSRF token
// bound to the session, logged and traced. Sign-in attempts are throttled per
// client address and overall, and only requests for an allowed Host are
// answered ([Config.AllowedHosts]; loopback names always), against DNS
// rebinding.
//
// Mount it on a worker's metrics port:
//
//	h, err := console.New(console.Config{Redis: rdb, KeyPrefix: "lh:", Worker: w, Topics: topics, Group: group,
//		Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}})
//	if err != nil { ... }
//	mux.Handle("/console/", http.StripPrefix("/console", h))
//
// or run it on its own with `worker ui`. Its reads are bounded (SCAN with a
// COUNT and a cursor, pages of leases, cached snapshots shared by every open
// page), never KEYS. The page is plain HTML, CSS and JavaScript embedded in
// the binary: no CDN and no build step.
package console
