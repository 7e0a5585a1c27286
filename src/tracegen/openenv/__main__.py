"""``python -m tracegen.openenv [--host H] [--port P] [--config FILE]`` (docs/rl.md)."""

from tracegen.openenv.server import main

if __name__ == "__main__":
    main()
