// Package wire holds the numbers that package steer's classifier and its
// kernel counterparts (internal/bpfsteer, the capture report) must agree
// on, without making them part of steer's API.
package wire
