# Bounded libFuzzer run of the ghost.json loader; called by `make fuzz`.
CLANG        ?= clang-14
FUZZ_SECONDS ?= 60
VAPI_CFLAGS  ?= $(shell pkg-config --cflags varnishapi)
F            := $(B)/fuzz
# LOAD: the loader's and the lookups' files, from the Makefile
SRC          := $(GHOST)/fuzz/fuzz_conf.c $(GHOST)/fuzz/fuzz_re.c \
		$(LOAD:%=$(GHOST)/%)

.PHONY: run
run: $(F)/fuzz_conf
	mkdir -p $(F)/corpus
	cp -n $(GHOST)/fuzz/seeds/*.json $(GHOST)/tests/data/*.json $(F)/corpus/ 2>/dev/null || true
	cd $(F) && ./fuzz_conf -max_total_time=$(FUZZ_SECONDS) -max_len=16384 \
	    -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
	    -dict=$(GHOST)/fuzz/ghost.dict corpus
	@echo "fuzz: no crash in $(FUZZ_SECONDS) s"

$(F)/fuzz_conf: $(SRC) $(GHOST)/ghost_state.h $(GHOST)/ghost_load.h
	mkdir -p $(F)
	$(CLANG) -std=gnu11 -Wall -Werror -g -O1 \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    $(VAPI_CFLAGS) -I$(GHOST) -o $@ $(SRC) -ljansson -lpcre2-8
