package state

import "fmt"

// BlockTable is a device-resident table of a state's or snapshot's blocks,
// per column: the blocks' base addresses (little-endian u64, one per block,
// in row order), so that a kernel finds row r of a column at
// table[r/RowsPerBlock - First] + (r%RowsPerBlock)*RowBytes with no host
// round trip (paged attention's block tables). A snapshot's table never
// changes; a state's follows its writes, rollbacks and merges in stream
// order, and a change to an entry an earlier version had moves the column
// to a new allocation, so a kernel queued earlier still reads its version's
// blocks: take Ptr from Column for each launch. When the state is evicted or
// moved to the host tier, Column rebuilds the table or brings the state back
// first, or answers why it cannot (ErrEvicted). Release it when done;
// releasing its state releases it too.
type BlockTable struct {
	impl tableImpl
}

// tableImpl is what the store's block table answers.
type tableImpl interface {
	Column(i int) (TableColumn, error)
	Release() error
}

func errNilTable(op string) error {
	return fmt.Errorf("state: %s on a nil *BlockTable: %w", op, ErrReleased)
}

// Column returns column i's table as it stands. The error is the failure
// to bring the table up to date (after one more try), ErrReleased after
// Release, or ErrRange for a column the state lacks.
func (t *BlockTable) Column(i int) (TableColumn, error) {
	if t == nil {
		return TableColumn{}, errNilTable("Column")
	}
	return t.impl.Column(i)
}

// Release frees the table's device memory (once the streams recorded on
// its state are done with it). Releasing twice does nothing.
//
//state:release
func (t *BlockTable) Release() error {
	if t == nil {
		return errNilTable("Release")
	}
	return t.impl.Release()
}
