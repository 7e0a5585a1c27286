"""``python -m tracegen.atropos serve|process|evaluate`` with Atropos's ``--env.*`` and
``--openai.*`` flags (docs/rl.md)."""

from tracegen.atropos import main

if __name__ == "__main__":
    main()
