package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A Layer is the content of one image layer: a directory tree (DirLayer) or
// a list of files (FilesLayer). Its tar is written with the entries sorted
// by path, every timestamp set to the image's Created time, no user or
// group names (only numeric ids), and hard links kept as links.
type Layer struct {
	// Comment is the layer's history entry ("the Debian root file system").
	Comment string

	dir   string
	files []File
}

// DirLayer is the tree under dir, as it is on disk: modes, numeric owners,
// symbolic and hard links, and the security.capability extended attribute
// (file capabilities). Device nodes, sockets and FIFOs are left out: the
// container runtime provides /dev.
func DirLayer(dir, comment string) Layer { return Layer{dir: dir, Comment: comment} }

// A File is one entry of a FilesLayer.
type File struct {
	// Path in the image, absolute ("/pause").
	Path string
	// Source is the file on disk whose content is copied; empty for a
	// directory (Mode has fs.ModeDir) or when Data is set.
	Source string
	// Data is the content when Source is empty.
	Data []byte
	// Mode is the permission bits, plus fs.ModeDir for a directory.
	Mode     fs.FileMode
	UID, GID int
}

// FilesLayer is a layer of the given files and directories; parent
// directories that are not listed are added (0755, root).
func FilesLayer(comment string, files ...File) Layer {
	return Layer{files: files, Comment: comment}
}

// writeTar writes the layer's tar to w with every timestamp set to mtime.
func (l Layer) writeTar(w io.Writer, mtime time.Time) error {
	tw := tar.NewWriter(w)
	var err error
	if l.dir != "" {
		err = writeDir(tw, l.dir, mtime)
	} else {
		err = writeFiles(tw, l.files, mtime)
	}
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish layer tar: %w", err)
	}
	return nil
}

// normalize makes a header independent of the machine and the time of the
// build.
func normalize(h *tar.Header, mtime time.Time) {
	h.ModTime, h.AccessTime, h.ChangeTime = mtime, time.Time{}, time.Time{}
	h.Uname, h.Gname = "", ""
	h.Devmajor, h.Devminor = 0, 0
	h.Format = tar.FormatPAX
	if len(h.PAXRecords) == 0 {
		// USTAR unless something needs PAX (long names, xattrs): the
		// common form, and the same bytes on every run.
		h.Format = tar.FormatUnknown
	}
}

func writeDir(tw *tar.Writer, root string, mtime time.Time) error {
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		var target string
		if mode&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return fmt.Errorf("read link %s: %w", p, err)
			}
		}
		h, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("tar header of %s: %w", p, err)
		}
		h.Name = name
		if fi.IsDir() {
			h.Name += "/"
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("stat %s: no owner information on this platform", p)
		}
		h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		if mode.IsRegular() && st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino}
			if first, seen := links[key]; seen {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				links[key] = name
			}
		}
		if mode.IsRegular() || fi.IsDir() {
			if capability, err := getxattr(p, "security.capability"); err != nil {
				return err
			} else if capability != nil {
				h.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(capability)}
			}
		}
		normalize(h, mtime)
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write tar header of %s: %w", name, err)
		}
		if h.Typeflag != tar.TypeReg || h.Size == 0 {
			return nil
		}
		return copyFile(tw, p, h.Size)
	})
}

func getxattr(p, attr string) ([]byte, error) {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(p, attr, buf)
	switch {
	case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read extended attribute %s of %s: %w", attr, p, err)
	}
	return buf[:n], nil
}

func copyFile(w io.Writer, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err != nil {
		return fmt.Errorf("copy %s into the layer: %w", p, err)
	}
	if n != size {
		return fmt.Errorf("copy %s into the layer: %d of %d bytes (changed while building)", p, n, size)
	}
	return nil
}

func writeFiles(tw *tar.Writer, files []File, mtime time.Time) error {
	entries := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return fmt.Errorf("layer file %q: the path must be absolute and clean, and not /", f.Path)
		}
		name := strings.TrimPrefix(f.Path, "/")
		if _, dup := entries[name]; dup {
			return fmt.Errorf("layer file %q: listed twice", f.Path)
		}
		entries[name] = f
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, ok := entries[dir]; !ok {
				entries[dir] = File{Path: "/" + dir, Mode: fs.ModeDir | 0o755}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		f := entries[name]
		h := &tar.Header{Name: name, Mode: int64(f.Mode.Perm()), Uid: f.UID, Gid: f.GID}
		if f.Mode&fs.ModeSetuid != 0 {
			h.Mode |= 0o4000
		}
		switch {
		case f.Mode.IsDir():
			if f.Source != "" || f.Data != nil {
				return fmt.Errorf("layer file %q: a directory has no content", f.Path)
			}
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case f.Source != "":
			fi, err := os.Stat(f.Source)
			if err != nil {
				return fmt.Errorf("layer file %q: %w", f.Path, err)
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("layer file %q: source %s is not a regular file", f.Path, f.Source)
			}
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		normalize(h, mtime)
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write tar header of %s: %w", name, err)
		}
		switch {
		case h.Typeflag != tar.TypeReg:
		case f.Source != "":
			if err := copyFile(tw, f.Source, h.Size); err != nil {
				return err
			}
		default:
			if _, err := tw.Write(f.Data); err != nil {
				return fmt.Errorf("write %s into the layer: %w", name, err)
			}
		}
	}
	return nil
}
