# The two commands a newcomer needs; both install what they use (scripts/bootstrap.sh).
.PHONY: demo test

demo:  ## run the main job on the embedded default (Kùzu + RocksDB)
	@python=$$(scripts/bootstrap.sh | tail -n 1) && $$python -m gnnstore demo

test:  ## install everything and run the whole test suite
	scripts/test.sh
