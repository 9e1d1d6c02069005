package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	dist, out, digestFile, platforms, image, push string
	r                                             release
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.dist, "dist", "dist", "the folder of make release: the binaries rollouts-gatewayapi-ssa-linux-ARCH and SHA256SUMS")
	fs.StringVar(&o.out, "out", "", "the OCI image layout to write (whatever it holds is removed); default: DIST/image")
	fs.StringVar(&o.digestFile, "digest-file", "", "where to write the image's reference with its digest, and each platform's digest; default: DIST/IMAGE-DIGEST")
	fs.StringVar(&o.platforms, "platforms", "linux/amd64 linux/arm64", "the platforms of the index, separated by spaces")
	fs.StringVar(&o.image, "image", "ghcr.io/gatewayapi-ssa/rollouts-plugin", "the image's name, tagged with the version (IMAGE-DIGEST and what is printed)")
	fs.StringVar(&o.r.version, "version", "", "the version the binaries were built with (their -version); the tag and the version label")
	fs.StringVar(&o.r.revision, "revision", "", "the commit, for the revision label; none when empty")
	fs.StringVar(&o.r.source, "source", "https://github.com/gatewayapi-ssa/rollouts-plugin", "the source label")
	created := fs.Int64("created", -1, "the image's created time in Unix seconds; default: $SOURCE_DATE_EPOCH, else 0 (1970)")
	fs.StringVar(&o.push, "push", "", "after checking, push the index to this reference (REGISTRY/REPO:TAG) with the credentials of ~/.docker/config.json or a credential helper, and read its digest back")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.r.version == "" || fs.NArg() > 0 {
		return o, fmt.Errorf("give -version (the binaries' -version), and no arguments")
	}
	o.out = cmpOr(o.out, filepath.Join(o.dist, "image"))
	o.digestFile = cmpOr(o.digestFile, filepath.Join(o.dist, "IMAGE-DIGEST"))
	if *created < 0 {
		*created = 0
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				return o, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not Unix seconds", s)
			}
			*created = n
		}
	}
	o.r.created = time.Unix(*created, 0).UTC()
	return o, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func run(args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.r.binaries, err = readBinaries(o.dist, strings.Fields(o.platforms)); err != nil {
		return err
	}
	idx, err := o.r.index()
	if err != nil {
		return err
	}
	if err := writeLayout(o.out, idx, o.r.version); err != nil {
		return fmt.Errorf("writing %s: %w", o.out, err)
	}
	digest, images, err := checkLayout(o.out, o.r)
	if err != nil {
		return fmt.Errorf("the image written does not hold the release: %w", err)
	}
	ran, err := runHostBinary(images, o.r.version)
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("%s:%s@%s", o.image, o.r.version, digest)
	if err := os.WriteFile(o.digestFile, []byte(digestFile(ref, images)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "image %s:%s in %s (an OCI image layout), created %s:\n%s", o.image, o.r.version, o.out, o.r.created.Format(time.RFC3339), digestFile(ref, images))
	fmt.Fprintf(out, "checked: each platform holds only %s, with the sha256 of %s/SHA256SUMS; its config says its os/arch, user %s, entrypoint [%s]\n%s\n",
		binaryPath, o.dist, user, binaryPath, ran)
	if o.push != "" {
		pushed, err := push(context.Background(), o.out, o.push, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "pushed %s@%s\n", o.push, pushed)
	}
	return nil
}

// digestFile is IMAGE-DIGEST: the reference to paste (name:tag@digest),
// then each platform's manifest digest.
func digestFile(ref string, images []platformImage) string {
	var b strings.Builder
	fmt.Fprintln(&b, ref)
	for _, p := range images {
		fmt.Fprintf(&b, "%s %s/%s\n", p.manifestDigest, p.platform.OS, p.platform.Architecture)
	}
	return b.String()
}

// push sends the layout's index, with every manifest and blob, to ref, and
// returns the digest the registry answers for ref: the index's digest, or an
// error.
func push(ctx context.Context, dir, ref string, opts ...remote.Option) (v1.Hash, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("-push %s: %w", ref, err)
	}
	idx, err := layoutIndex(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	want, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	opts = append(opts, remote.WithContext(ctx))
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing to %s: %w (log in with crane auth login or docker login, which write ~/.docker/config.json)", ref, err)
	}
	desc, err := remote.Head(r, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("reading %s back: %w", ref, err)
	}
	if desc.Digest != want {
		return v1.Hash{}, fmt.Errorf("%s has digest %s after the push, want %s", ref, desc.Digest, want)
	}
	return desc.Digest, nil
}
