package state

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteAtomic writes the file at path whole or not at all: fill writes the content into a
// temporary file in path's directory (named by pattern, as os.CreateTemp takes it; mode
// 0600), which is synced, closed and renamed over path, and the directory is synced. On any
// failure the temporary file is removed and the file at path stays as it was. The home table
// and the TLS session ticket keys are both written by it.
func WriteAtomic(path, pattern string, fill func(io.Writer) error) error {
	return writeAtomic(osCreateTemp, path, pattern, fill)
}

func osCreateTemp(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) }

// writeAtomic is WriteAtomic with the temporary file made by create (tests inject failures).
func writeAtomic(create func(dir, pattern string) (tempFile, error), path, pattern string, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := create(dir, pattern)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is: best effort.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
