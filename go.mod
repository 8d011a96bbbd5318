module github.com/logbook-agents/logbook

go 1.26.8

require (
	github.com/evanphx/json-patch/v5 v5.9.11
	github.com/klauspost/compress v1.20.4
)
