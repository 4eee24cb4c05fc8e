"""Results on disk and the pages made from them. Producers (the demo, `sim/`, `bench/`)
record each table they print with `record.save_table` into `out/tables/NAME.jsonl`, stamped
with the command, the date and the machine; `python -m results` (`make report`) renders
`docs/src/*.md` into `docs/*.md`, filling in those tables and the plots beside them."""
