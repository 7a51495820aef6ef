package zk

import (
	"slices"
	"testing"
)

func TestSortContenders(t *testing.T) {
	got := []string{
		"lease_holder",
		"bbb__lock__0000000002",
		"aaa__rlock__0000000003",
		"ccc__lock__0000000000",
		"ddd__lock__0000000001",
	}
	sortContenders(got)
	want := []string{
		"ccc__lock__0000000000",
		"ddd__lock__0000000001",
		"bbb__lock__0000000002",
		"aaa__rlock__0000000003",
		"lease_holder",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sortContenders = %q, want %q", got, want)
	}
}
