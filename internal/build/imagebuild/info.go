package imagebuild

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Info describes a built image: bin/images/NAME.json, for the tests, the
// demo and people.
type Info struct {
	// Name is the reference the archive imports as:
	// "localhost/varnishgw/gateway:v0.0.0-20261124111828-9da7807abcde".
	Name       string `json:"name"`
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	// Digest is the manifest digest, the same in a registry after a push.
	Digest   string    `json:"digest"`
	Revision string    `json:"revision"`
	Created  time.Time `json:"created"`
	// Archive, Packages and SBOM are file names in the same directory: the
	// OCI archive, dpkg -l of the image, and a CycloneDX SBOM.
	Archive  string `json:"archive"`
	Packages string `json:"packages"`
	SBOM     string `json:"sbom"`
	// Size is the layers' size uncompressed (the image on a node's disk),
	// CompressedSize as stored in the archive and pulled.
	Size           int64 `json:"size"`
	CompressedSize int64 `json:"compressedSize"`
	// Varnish is the varnish package version in the gateway image.
	Varnish string `json:"varnish,omitempty"`
	// Dir is the directory the description was read from (not written).
	Dir string `json:"-"`
}

// DefaultCache is the cache of Debian roots, package lists and downloads
// that make image uses: $VARNISHGW_CACHE/image, else varnishgw/image in the
// user's cache directory.
func DefaultCache() string {
	if d := os.Getenv("VARNISHGW_CACHE"); d != "" {
		return filepath.Join(d, "image")
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "varnishgw", "image")
}

// ArchivePath is the archive's path.
func (i Info) ArchivePath() string { return filepath.Join(i.Dir, i.Archive) }

func (i Info) write(dir, name string) error {
	data, err := json.MarshalIndent(i, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".json"), append(data, '\n'), 0o644)
}

// ReadInfo reads the description of image name ("gateway", "echo") from dir
// (bin/images).
func ReadInfo(dir, name string) (Info, error) {
	var i Info
	data, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		return i, fmt.Errorf("read the %s image's description: %w; build the images with make image", name, err)
	}
	if err := json.Unmarshal(data, &i); err != nil {
		return i, fmt.Errorf("read %s: %w", filepath.Join(dir, name+".json"), err)
	}
	i.Dir = dir
	return i, nil
}
