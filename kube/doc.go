// Package kube is the plugin's reading side of the apiserver: which API
// version of each route kind the cluster serves (discovered again when the
// apiserver stops serving it), a watch cache per kind and namespace (one
// that fails to sync keeps retrying, and reads are GETs until it has), the
// overlay of the plugin's own writes that keeps a read from going back
// before them (Reader.Written), the CRDs' schema (read once per version),
// and finding a Rollout's routes by name or label selector (Resolve). It
// reads the apiserver's JSON into routes in one pass: a served route
// (decode.go), a watch's events (stream.go) and a write's answer (answer.go:
// AnswerOf, the Answer package ssa returns). The
// clients and their retrying transport, and the apiserver's refusals in
// words that say what to grant, are package kubeclient.
package kube
