package gfx

//state:extern acquire 0 1 example.com/vk.CreateImage
//state:extern frees img example.com/vk.DestroyImage
//state:extern frees mem example.com/vk.FreeMemory
//state:extern acquire example.com/vk.GenTexture
//state:extern frees t example.com/vk.DeleteTexture
//state:extern valid example.com/vk.Texture.Valid
//state:extern acquire example.com/vk.NewBuffer
//state:extern release example.com/vk.(*Buffer).Destroy
//state:extern takes b onsuccess example.com/vk.Submit
//state:extern acquire example.com/vk.NewShader
//state:extern release example.com/vk.(*Shader).Destroy
//state:extern acquire example.com/vk.CreatePipeline
//state:extern acquire example.com/vk.CreatePipelineP
//state:extern release example.com/vk.(*Pipeline).Destroy
//state:extern acquire example.com/vk.NewCmdPool
//state:extern release example.com/vk.(*CmdPool).Destroy
//state:extern child recv example.com/vk.(*CmdPool).Alloc
