package main

import (
	"archive/tar"
	"io"
)

// newTarReader returns a function that gives the next regular file of a
// tar stream (its name and content) and io.EOF after the last.
func newTarReader(r io.Reader) func() (string, []byte, error) {
	tr := tar.NewReader(r)
	return func() (string, []byte, error) {
		for {
			hdr, err := tr.Next()
			if err != nil {
				return "", nil, err
			}
			if hdr.Typeflag != tar.TypeReg {
				continue
			}
			data, err := io.ReadAll(tr)
			return hdr.Name, data, err
		}
	}
}
