package kafka

import "github.com/twmb/franz-go/pkg/kerr"

func kerrOf(code int16) error { return kerr.ErrorForCode(code) }
