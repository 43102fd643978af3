package pkg

func Exported() {}
