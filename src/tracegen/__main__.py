from tracegen.cli import main

main()
