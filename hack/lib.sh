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
