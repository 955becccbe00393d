# The two commands a newcomer needs; both install what they use (scripts/bootstrap.sh).
.PHONY: demo test

demo:  ## generate, ingest, serve and train on the embedded default (LadybugDB + RocksDB)
	@python=$$(GNNSTORE_EXTRAS=train scripts/bootstrap.sh | tail -n 1) && $$python -m gnnstore demo

test:  ## install everything and run the whole test suite
	scripts/test.sh
