// Package deadletter writes the dead-letter copy of a record exactly once,
// across redelivery, rebalances and crashes, and names the headers and
// reasons such a copy carries (the root package re-exports them).
//
// A [Writer] is built once from a [Config] (a Kafka client, Redis, the lease
// manager's locks, the dead-letter topic) and has one entry point,
// [Writer.Write], which returns when the copy exists: [Written] or
// [WrittenTruncated] when this call wrote it, [AlreadyWritten] when an earlier
// attempt had.
//
// Per original record, named by the dead-letter topic and the original's
// cluster ID, topic ID and topic/partition/offset (so that a new cluster or a
// recreated topic, whose offsets start at 0 again, never finds an old
// record's marker), the Writer keeps a marker in Redis for the retention and
// serializes writers with a lock of the same name, a lease of the lease
// manager (renewed while held, expiring after its TTL when its holder dies):
//
//  1. Take the lock. Another holder: wait and retry; Write does not return
//     meanwhile.
//  2. Marker "done": a copy exists; write none.
//  3. Marker "pending": an earlier attempt may have produced (the process
//     died between the produce and "done", a produce failed on the client
//     but landed, or the holder lost the lock with its produce in flight).
//     Wait until that attempt's produce window has closed, then read the
//     dead-letter topic, every partition, from the recorded offsets to its
//     end now, for a record whose dlq-original-* headers name this record:
//     found, set "done" and return; not found, the earlier attempt never
//     landed: go on as in 4.
//  4. Open a produce window (lua/dlq_stamp.lua, fenced by the lock: the
//     marker becomes "pending" with the window's end in Redis time and, the
//     first time, the dead-letter topic's end offsets listed before it),
//     produce the copy with a deadline inside the window, then set "done".
//
// Any copy lies at or after the recorded offsets (they were listed before
// the first produce), and a copy whose produce began inside its window has
// landed or failed when the window has closed (the window is the produce's
// client deadline, plus a margin for the broker), so the scan finds every
// copy an earlier holder wrote. A holder that lost the lock cannot open a
// window (the script is fenced) and so produces nothing more. What remains
// is the assumption every lease makes: that a produce request is not delayed
// in the network or the broker past the margin.
//
// Two consumers with the same record (a rebalance, or a redelivery after a
// crash): only the lock holder reads the marker and produces; the other
// waits inside Write, so it does not finish the record (and commit its
// offset) before a copy exists, then finds "done".
//
// Redis unreachable: Write fails closed, like claims. Nothing is produced
// and Write retries with backoff until Redis answers or its context ends;
// the record is then left to the partition's next owner. A marker or lock
// lost with Redis data (a restart without persistence) can only cost a
// second copy, never a lost one.
//
// A copy the dead-letter topic refuses as too large (for the producer's
// batch limit or the topic's max.message.bytes) would be refused on every
// attempt: a small stand-in carrying HeaderTruncated, without the value, is
// written in its place, in the same window, so that the record can be
// finished.
package deadletter
