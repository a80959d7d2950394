package hash

// The unrolled table sums for the tuple lengths: one table load and XOR per
// input byte, with constant positions so that no bounds are checked. The
// callers guarantee len(d) == n and len(tab) >= n.

func sum8(tab [][256]uint32, d []byte) uint32 {
	d = d[:8]
	q := (*[8][256]uint32)(tab[:8])
	return q[0][d[0]] ^ q[1][d[1]] ^ q[2][d[2]] ^ q[3][d[3]] ^
		q[4][d[4]] ^ q[5][d[5]] ^ q[6][d[6]] ^ q[7][d[7]]
}

// sum16 is the contribution of d[0:16] at table positions q[0:16].
func sum16(q *[16][256]uint32, d *[16]byte) uint32 {
	h0 := q[0][d[0]] ^ q[1][d[1]] ^ q[2][d[2]] ^ q[3][d[3]]
	h1 := q[4][d[4]] ^ q[5][d[5]] ^ q[6][d[6]] ^ q[7][d[7]]
	h2 := q[8][d[8]] ^ q[9][d[9]] ^ q[10][d[10]] ^ q[11][d[11]]
	h3 := q[12][d[12]] ^ q[13][d[13]] ^ q[14][d[14]] ^ q[15][d[15]]
	return h0 ^ h1 ^ h2 ^ h3
}

func sum32(tab [][256]uint32, d []byte) uint32 {
	return sum16((*[16][256]uint32)(tab[0:16]), (*[16]byte)(d[0:16])) ^
		sum16((*[16][256]uint32)(tab[16:32]), (*[16]byte)(d[16:32]))
}

func sum36(tab [][256]uint32, d []byte) uint32 {
	d = d[:36]
	q := (*[36][256]uint32)(tab[:36])
	return sum16((*[16][256]uint32)(q[0:16]), (*[16]byte)(d[0:16])) ^
		sum16((*[16][256]uint32)(q[16:32]), (*[16]byte)(d[16:32])) ^
		q[32][d[32]] ^ q[33][d[33]] ^ q[34][d[34]] ^ q[35][d[35]]
}
