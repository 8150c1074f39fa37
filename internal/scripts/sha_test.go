package scripts_test

import (
	"crypto/sha1"
	"encoding/hex"
)

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
