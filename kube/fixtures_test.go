package kube

// wtNS is the namespace of the routes the tests read; their rules come from
// package routestest.
const wtNS = "shop"
