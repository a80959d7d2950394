package filter

import "fmt"

func ExampleCompile() {
	p, err := Compile(Options{}, "tcp", "port", "80")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(p.Disassemble())
	// Output:
	// (000) ldh      [12]
	// (001) jeq      #0x86dd          jt 2	jf 8
	// (002) ldb      [20]
	// (003) jeq      #0x6             jt 4	jf 19
	// (004) ldh      [54]
	// (005) jeq      #0x50            jt 18	jf 6
	// (006) ldh      [56]
	// (007) jeq      #0x50            jt 18	jf 19
	// (008) jeq      #0x800           jt 9	jf 19
	// (009) ldb      [23]
	// (010) jeq      #0x6             jt 11	jf 19
	// (011) ldh      [20]
	// (012) jset     #0x1fff          jt 19	jf 13
	// (013) ldxb     4*([14]&0xf)
	// (014) ldh      [x + 14]
	// (015) jeq      #0x50            jt 18	jf 16
	// (016) ldh      [x + 16]
	// (017) jeq      #0x50            jt 18	jf 19
	// (018) ret      #262144
	// (019) ret      #0
}

func ExampleProgram_Match() {
	p, err := Compile(Options{}, "udp port 53")
	if err != nil {
		fmt.Println(err)
		return
	}
	// An IPv4 UDP datagram from port 53, as Ethernet delivers it.
	frame := []byte{
		0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00,
		0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
		0, 53, 0x9c, 0x40, 0, 8, 0, 0,
	}
	keep, ok := p.Match(frame)
	fmt.Println(keep, ok)
	frame[35] = 54 // from port 54
	fmt.Println(p.Match(frame))
	// Output:
	// 42 true
	// 0 false
}
