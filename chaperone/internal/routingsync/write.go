package routingsync

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data: it writes a temporary file in the
// same directory, syncs it, makes it world-readable (varnishd's unprivileged
// user reads it), renames it over path and syncs the directory, so that a
// reader sees the old or the new content, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	tmp, _, err := writeTemp(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return commitTemp(tmp, path)
}

// writeTemp streams write's output to a new world-readable temporary file
// next to path, syncs it and returns its name and SHA-256.
func writeTemp(path string, write func(io.Writer) error) (tmp string, sum [sha256.Size]byte, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", sum, fmt.Errorf("write %s: %w", path, err)
	}
	tmp = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	if err = write(bw); err != nil {
		return "", sum, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = bw.Flush(); err != nil {
		return "", sum, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Chmod(0o644); err != nil {
		return "", sum, fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return "", sum, fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return "", sum, fmt.Errorf("close %s: %w", tmp, err)
	}
	copy(sum[:], h.Sum(nil))
	return tmp, sum, nil
}

// commitTemp renames tmp over path and syncs the directory.
func commitTemp(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	syncDir(filepath.Dir(path))
	return nil
}

// linkAtomic makes dst a hard link to src's file, replacing dst atomically
// (files are never modified in place, so sharing an inode is safe).
func linkAtomic(src, dst string) error {
	tmp := dst + ".link-tmp"
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		return fmt.Errorf("link %s: %w", src, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s to %s: %w", tmp, dst, err)
	}
	syncDir(filepath.Dir(dst))
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: some file systems cannot sync a directory
		d.Close()
	}
}
