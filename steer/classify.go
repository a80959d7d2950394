package steer

import (
	"errors"

	"github.com/rpsgo/rps/hash"
)

// ClassifierConfig configures a [Classifier].
type ClassifierConfig struct {
	// Hasher computes the flowid. Required.
	Hasher *hash.Toeplitz
	// Symmetric puts the endpoints in canonical order before hashing, so that
	// both directions of a connection get one flowid under any key.
	Symmetric bool
	// UDP4Tuple hashes UDP (and SCTP) over addresses and ports. Off by
	// default, as in FreeBSD: the fragments of a large datagram carry no
	// ports and hash over addresses only, so with a 4-tuple they may reach
	// another worker than the datagram's unfragmented siblings.
	UDP4Tuple bool
}

// Classifier turns raw frames into flow keys and flowids. It is immutable and
// safe for concurrent use.
type Classifier struct {
	h         *hash.Toeplitz
	symmetric bool
	udp4      bool
}

// NewClassifier returns a classifier for cfg.
func NewClassifier(cfg ClassifierConfig) (*Classifier, error) {
	if cfg.Hasher == nil {
		return nil, errors.New("steer: classifier needs a hasher")
	}
	return &Classifier{h: cfg.Hasher, symmetric: cfg.Symmetric, udp4: cfg.UDP4Tuple}, nil
}

// Classify classifies frame, writing the result to out. STUB: replaced by the
// real classifier.
func (c *Classifier) Classify(frame []byte, out *Classification) {
	*out = Classification{Reason: ReasonNonIP}
}
