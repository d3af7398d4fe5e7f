package exchange

import (
	"sync"

	"github.com/weirproject/weir/sdk"
)

// Record batches are reused: a batch of 256 records is 20 KiB of record
// headers, and allocating one per batch was a tenth of a keyed job's CPU
// with the GC it caused. A batch's array has exactly one owner at a time:
// the RecordWriter filling it, the queue holding it, the remote sender
// encoding it or the subtask processing it. The last of them, the sender
// once the batch is encoded or the subtask once every record went through
// its operator, releases it. Whoever keeps records that another will
// release (channel state of an unaligned checkpoint, the records a barrier
// overtook) keeps a copy (CloneRecords): a released array is filled with
// other records at once.
var batches = sync.Pool{}

// GetRecords returns an empty batch with room for n records.
func GetRecords(n int) []sdk.Record {
	if p, ok := batches.Get().(*[]sdk.Record); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]sdk.Record, 0, n)
}

// ReleaseRecords gives recs's array back for reuse; its owner must not
// touch it afterwards. The records are cleared so that the pool does not
// keep their keys and values alive.
func ReleaseRecords(recs []sdk.Record) {
	if cap(recs) == 0 {
		return
	}
	recs = recs[:cap(recs)]
	clear(recs)
	batches.Put(&recs)
}

// CloneRecords copies the records of buffers that another owner will
// release, so the copy outlives them. Keys and values are not copied: a
// record's bytes are never written once it is emitted.
func CloneRecords(bufs []Buffer) []Buffer {
	for i := range bufs {
		if bufs[i].Kind == KindRecords {
			bufs[i].Records = append([]sdk.Record(nil), bufs[i].Records...)
		}
	}
	return bufs
}
