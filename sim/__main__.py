from sim.cli import main

main(prog_name="python -m sim")
