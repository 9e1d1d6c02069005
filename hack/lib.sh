# Shared by the asset scripts; source it, do not run it.

# kubernetes_module K8S_VERSION CMD...: turns the current (empty) directory
# into a throwaway module that can build the given k8s.io/kubernetes commands
# from the Go module proxy: it requires k8s.io/kubernetes and replaces every
# staging module that k8s.io/kubernetes replaces with ./staging/... by its
# published v0.x release.
kubernetes_module() {
  local version=$1; shift
  go mod init kubernetes-commands >/dev/null 2>&1
  local modfile
  modfile=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  local staging_version="v0.${version#1.}"
  for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$modfile"); do
    go mod edit -replace "$m=$m@$staging_version"
  done
  go mod edit -require "k8s.io/kubernetes@v$version"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for cmd in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
    printf ')\n'
  } > tools.go
  go mod tidy >&2
}

# gomod_field MODULE@VERSION FIELD prints a field (GoMod, Dir) of `go mod download -json`.
gomod_field() {
  go mod download -json "$1" | sed -n "s/.*\"$2\": \"\\(.*\\)\".*/\\1/p"
}

# directives KEYWORD GO.MOD prints the body of every KEYWORD directive of a
# go.mod (replace, exclude), one a line, in block or single-line form.
directives() {
  awk -v kw="$1" '
    $0 ~ "^" kw "[ \t]*\\($" { inblock = 1; next }
    inblock && /^\)/            { inblock = 0; next }
    inblock                     { print; next }
    $0 ~ "^" kw "[ \t]"        { sub("^" kw "[ \t]+", ""); print }
  ' "$2"
}

# copy_replaces GO.MOD copies every replace directive that points at a module
# version (not at a local directory) into the current module.
copy_replaces() {
  directives replace "$1" | while read -r line; do
    line="${line%%//*}"
    [ -n "${line// /}" ] || continue
    old="${line%%=>*}"; new="${line#*=>}"
    old=$(echo $old | tr ' ' '@'); new=$(echo $new)
    case "$new" in ./*|../*|/*) continue ;; esac
    new=$(echo "$new" | tr ' ' '@')
    go mod edit -replace "$old=$new"
  done
}

# copy_excludes GO.MOD copies every exclude directive into the current module
# (a dependency's excludes do not apply to the module that requires it).
copy_excludes() {
  directives exclude "$1" | while read -r mod version _; do
    [ -n "$mod" ] && [ -n "$version" ] || continue
    case "$mod" in //*) continue ;; esac
    go mod edit -exclude "$mod@$version"
  done
}

# cached_tool NAME MODULE/CMD VERSION NOTE: prints the path of the Go command
# MODULE/CMD at vVERSION, built the first time with the Go module proxy into
# the tools cache (keyed by name and version; TOOLS_CACHE overrides it). NOTE
# says how long the first build takes. The build runs outside the repository,
# so it neither reads nor changes its go.mod, one at a time (a second caller
# waits and then finds the binary), into a scratch GOBIN first, so a failed
# build leaves no binary behind.
cached_tool() {
  local name=$1 pkg=$2 version=$3 note=$4
  local cache="${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollouts-gatewayapi-ssa/tools}"
  local dest="$cache/$name-$version"
  if [ -x "$dest/$name" ]; then
    echo "$dest/$name"; return 0
  fi
  mkdir -p "$dest"
  exec 9>"$dest/.lock"
  flock 9
  if [ ! -x "$dest/$name" ]; then
    echo "$name: building $pkg@v$version ($note)" >&2
    local start work
    start=$(date +%s)
    work=$(mktemp -d)
    (cd "$work" && GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOBIN="$work/bin" \
      go install -ldflags "-s -w" "$pkg@v$version" >&2) || { rm -rf "$work"; return 1; }
    mv "$work/bin/$name" "$dest/$name"
    rm -rf "$work"
    echo "$name: built $dest/$name in $(( $(date +%s) - start ))s" >&2
  fi
  exec 9>&-
  echo "$dest/$name"
}
