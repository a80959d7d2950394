//go:build !amd64

package hash

// haveAccel reports whether the CPU can run the accelerated path; there is
// none on this architecture, so Sum always uses the tables.
const haveAccel = false

// accel is the per-key state of the accelerated path: empty here.
type accel struct{ on bool }

func (a *accel) init(key []byte) {}

// sumAny is Sum: the table path.
func sumAny(t *Toeplitz, data []byte) uint32 { return sumGo(t, data) }

func sumTuplesAccel(t *Toeplitz, dst []uint32, tps []Tuple) {}

func sumIPv4Accel(t *Toeplitz, dst []uint32, in [][IPv4Tuple4Len]byte) bool { return false }
