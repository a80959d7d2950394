package filter

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// benchExprs are expressions of several sizes for BenchmarkCompile.
func benchExprs() map[string]string {
	var hosts []string
	for i := 0; i < 100; i++ {
		hosts = append(hosts, fmt.Sprintf("host 10.0.%d.%d", i/250, i%250))
	}
	return map[string]string{
		"tcp-port":   "tcp port 80",
		"hosts":      "host 10.0.0.1 or 10.0.0.2 and not port 22",
		"vlan-flags": "vlan 100 and tcp[tcpflags] & (tcp-syn|tcp-ack) != 0",
		"arith":      "ip[6:2] & 0x1fff = 0 and (tcp[12] >> 4) * 4 + 20 < len - 14",
		"100-hosts":  strings.Join(hosts, " or "),
	}
}

// BenchmarkCompile measures compiling an expression with the built-in
// compiler and, as the baseline it replaces, with tcpdump (a process per
// expression), in the same run.
func BenchmarkCompile(b *testing.B) {
	_, err := exec.LookPath("tcpdump")
	haveTcpdump := err == nil
	for name, expr := range benchExprs() {
		for _, c := range []Compiler{CompilerBuiltin, CompilerTcpdump} {
			b.Run(fmt.Sprintf("%s/%v", name, c), func(b *testing.B) {
				if c == CompilerTcpdump && !haveTcpdump {
					b.Skip("no tcpdump")
				}
				b.ReportAllocs()
				var n int
				for i := 0; i < b.N; i++ {
					p, err := Compile(Options{Compiler: c}, expr)
					if err != nil {
						b.Fatal(err)
					}
					n = p.Len()
				}
				b.ReportMetric(float64(n), "insns")
			})
		}
	}
}
