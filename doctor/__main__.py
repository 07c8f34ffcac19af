from doctor.cli import main

main()
