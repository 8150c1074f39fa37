// Package slot computes Redis Cluster hash slots, so that keys can be
// grouped by the node that holds them before they are sent.
package slot

import "strings"

// Of returns the Redis Cluster hash slot of key, as CLUSTER KEYSLOT answers
// it: CRC16 (XMODEM) of the key's hash tag (the text between its first '{'
// and the first '}' after it, when that text is not empty), or of the whole
// key when it has none, modulo 16384.
func Of(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
