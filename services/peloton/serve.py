"""`python -m peloton.serve SERVICE ...`: start one service without loading the whole CLI."""

from peloton.cli.serve_cmd import build

if __name__ == "__main__":
    build()()
